"""Knowledge distillation in miniature: shrink a fine-tuned MiniLM for serving.

"We leverage knowledge distillation during the pre-training phase and show that it is
possible to reduce the size of a BERT model by 40%, while retaining 97% of its
language understanding capabilities" (Sanh et al., 2019). Here the teacher is the
packaged all-MiniLM-L6-v2 fine-tuned on Rotten Tomatoes (10,246 / 2,562 split, seed 0;
`keras-attn finetune`), and its students have 2 and 3 of its 6 layers, initialised from
every k-th of them (DistilBERT's initialisation; `student_from_teacher`). Each student
is trained on the same data and steps three ways (`keras-attn distill`):

- a: on the labels alone (`--output-weight 0`: no teacher);
- b: + the teacher's softened outputs (T = 2, x T^2; Hinton et al., 2015);
- c: + its hidden states and attention distributions on mapped layers (TinyBERT,
  MiniLM).

Every figure is accuracy on the whole held-out split; the table goes to stdout and
`results.json`, every run stays a run folder (`keras-attn export` serves any of them).

Run:  python examples/distill_minilm.py [--teacher-steps 600] [--steps 600] [--smoke]
"""

import argparse
import json
import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402

from keras_attn.cli.main import main as keras_attn  # noqa: E402

VARIANTS = {
    "a": ["--output-weight", "0"],
    "b": [],
    "c": ["--hidden-weight", "1", "--attention-weight", "1"],
}


def common(steps, smoke):
    flags = ["--steps", str(steps), "--steps-per-epoch", str(min(steps, 200))]
    flags += ["--checkpoint-every", str(min(steps, 200)), "--attention-every", "0"]
    flags += ["--verbose", "0", "--jit-compile", str(not smoke).lower()]
    # Every validation (and the final figure) on the whole held-out split.
    return flags + (["--validation-steps", "2"] if smoke else [])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--teacher-steps", type=int, default=600)
    parser.add_argument("--steps", type=int, default=600, help="steps of each student")
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="runs/distill_minilm")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one student")
    args = parser.parse_args(argv)
    variants = VARIANTS
    if args.smoke:  # every loss on, one student: the whole path, once
        args.teacher_steps, args.steps, args.layers = 2, 2, args.layers[:1]
        variants = {"c": VARIANTS["c"]}
    root = pathlib.Path(args.output)
    seed = ["--seed", str(args.seed)]

    # The smoke checks the path, not the numbers: its batches are small.
    length, batch = ("16", "4") if args.smoke else ("64", "32")
    teacher_dir = root / "teacher"
    flags = ["--backbone", "minilm", "--pooling", "mean", "--sequence-length", length]
    flags += ["--learning-rate", "0.0001", "--batch-size", batch, "--output", str(teacher_dir)]
    teacher = keras_attn(["finetune", *flags, *seed, *common(args.teacher_steps, args.smoke)])
    keras.backend.clear_session()
    rows = [{"model": "teacher (6 layers)", "accuracy": teacher.metrics["val_accuracy"]}]
    print(json.dumps(rows[0]), flush=True)

    for layers in args.layers:
        for variant, extra in variants.items():
            run = root / f"student-{layers}{variant}"
            flags = ["--teacher", str(teacher_dir), "--student-layers", str(layers)]
            flags += ["--learning-rate", "0.0001", "--batch-size", batch, "--output", str(run)]
            result = keras_attn(["distill", *flags, *extra, *seed, *common(args.steps, args.smoke)])
            keras.backend.clear_session()
            accuracy = result.metrics["val_accuracy"]
            rows.append(
                {
                    "model": f"student, {layers} layers, {variant}",
                    "accuracy": accuracy,
                    "of_teacher": accuracy / rows[0]["accuracy"],
                    "minutes": round(result.seconds / 60, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))

    print(f"\nteacher {args.teacher_steps} steps, each student {args.steps} steps")
    for row in rows:
        share = f"  {row['of_teacher']:.1%} of the teacher" if "of_teacher" in row else ""
        print(f"{row['model']:<26} {row['accuracy']:.4f}{share}")


if __name__ == "__main__":
    main()
