"""`examples/serve_with_tf_serving.md`: every bash and python block runs, in order, in a
fresh folder; `curl` and the client talk to a stand-in for TF Serving (REST and gRPC)
serving the export the walkthrough made. Blocks after `<!-- ci: skip ... -->` (Docker)
are the only ones left out."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.export.stand_in_server import StandInServer

WALKTHROUGH = pathlib.Path(__file__).parents[2] / "examples" / "serve_with_tf_serving.md"
BLOCK = re.compile(
    r"(?P<skip><!-- ci: skip[^>]*-->\n)?```(?P<language>\w+)\n(?P<code>.*?)```", re.S
)


def blocks(text):
    return [(m["language"], m["code"], bool(m["skip"])) for m in BLOCK.finditer(text)]


def test_the_walkthrough_parses_into_blocks():
    found = blocks(WALKTHROUGH.read_text(encoding="utf-8"))
    skipped = [code for _, code, skip in found if skip]
    assert len(skipped) == 2 and all(code.startswith("docker run") for code in skipped)
    assert {language for language, _, _ in found} == {"bash", "python"}
    # Nothing else needs Docker or a real server.
    assert not any("docker" in code for _, code, skip in found if not skip)


@pytest.mark.slow
def test_every_block_of_the_walkthrough_runs(tmp_path):
    environment = dict(
        os.environ,
        PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=str(WALKTHROUGH.parents[1]),
    )
    server, outputs = None, []
    try:
        for language, code, skip in blocks(WALKTHROUGH.read_text(encoding="utf-8")):
            if skip:
                continue
            if "localhost:850" in code:
                if server is None:  # the export exists by now: serve it
                    server = StandInServer(tmp_path / "saved_models", "reviews").__enter__()
                code = code.replace("localhost:8501", f"127.0.0.1:{server.rest_port}").replace(
                    "localhost:8500", f"127.0.0.1:{server.grpc_port}"
                )
            command = (
                ["bash", "-euo", "pipefail", "-c", code]
                if language == "bash"
                else [sys.executable, "-c", code]
            )
            completed = subprocess.run(
                command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900
            )
            assert completed.returncode == 0, (
                f"{code}\n{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}"
            )
            outputs.append((code, completed.stdout))
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    by_command = {code.split()[0] + " " + code.split()[1]: out for code, out in outputs}
    predictions = json.loads(next(out for code, out in outputs if ":predict" in code))[
        "predictions"
    ]
    assert len(predictions) == 2 and {p["labels"] for p in predictions} <= {"rotten", "fresh"}
    results = json.loads(next(out for code, out in outputs if ":classify" in code))["results"]
    assert [label for label, _ in results[0]] == ["rotten", "fresh"]
    assert (
        "serving_default" in by_command["saved_model_cli show"]
        and "text" in by_command["saved_model_cli show"]
    )
    assert (
        tmp_path / "saved_models" / "reviews" / "1" / "assets.extra" / "tf_serving_warmup_requests"
    ).is_file()
    assert (tmp_path / "attention.png").stat().st_size > 10_000
    config = (tmp_path / "serving" / "models.config").read_text()
    assert 'base_path: "/models/reviews"' in config and "stable" in config
    assert "max_batch_size" in (tmp_path / "serving" / "batching.config").read_text()
