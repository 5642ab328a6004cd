"""Renders the TensorBoard pictures of docs/training.md from a run's logs, in headless Chromium.

The pictures are screenshots of TensorBoard itself (the same server and page a person
opens after `tensorboard --logdir runs/main/pretrain/logs`, the main job's pre-training),
not re-plots of the event files:

    tensorboard_scalars.png    Time Series: losses, accuracies, learning rate, tokens/s
    tensorboard_attention.png  the attention maps of the probe sentence, layer by layer

Needs Debian's Chromium and the Playwright client, which are not project dependencies
(nothing else uses a browser):

    apt-get install -y chromium
    pip install playwright            # the client only; no browser download
    make run                          # writes runs/main/{pretrain,finetune}/logs
    .venv/bin/python examples/images/screenshot_tensorboard.py [--logdir runs/main/pretrain/logs]
"""

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
# As the machine's own notes advise for headless Chromium on a closed network: no
# background connections, no first-run or component updates.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tensorboard(logdir, port):
    tensorboard = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    process = subprocess.Popen(
        [
            tensorboard,
            "--logdir",
            logdir,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--reload_interval",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/data/runs", timeout=2
            ) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"tensorboard did not answer on 127.0.0.1:{port} within 60 s")


def screenshot(page, url, tags, kind, path, settle_s, height=None):
    """Time Series with the tags matching `tags`, cards of `kind`; the top `height` pixels."""
    page.goto(url)
    page.wait_for_selector("input[placeholder='Filter tags (regex)']", timeout=60_000)
    page.fill("input[placeholder='Filter tags (regex)']", tags)
    page.locator("button.filter-view-button", has_text=kind).click()
    settings = page.locator("button.settings-button.checked")  # the settings pane, open
    if settings.count():
        settings.first.click()
    page.wait_for_timeout(settle_s * 1000)  # cards render lazily as data arrive
    clip = (
        {"x": 0, "y": 0, "width": page.viewport_size["width"], "height": height} if height else None
    )
    page.screenshot(path=path, clip=clip)
    print(f"wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logdir", default="runs/main/pretrain/logs")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--output", default=HERE)
    parser.add_argument("--settle", type=float, default=6.0, help="seconds to let charts draw")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = start_tensorboard(args.logdir, port)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
            url = f"http://127.0.0.1:{port}/#timeseries"
            screenshot(
                page,
                url,
                "^running_|^evaluation_.*accuracy|^learning_rate|^tokens_per",
                "Scalars",
                os.path.join(args.output, "tensorboard_scalars.png"),
                args.settle,
            )
            screenshot(
                page,
                url,
                "^layer_",
                "Image",
                os.path.join(args.output, "tensorboard_attention.png"),
                args.settle,
                height=500,
            )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
