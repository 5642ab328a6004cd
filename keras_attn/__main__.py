"""`python -m keras_attn`: the main job (pre-train, fine-tune, export, predict); see `--help`."""

from keras_attn.cli.main_job import main

if __name__ == "__main__":
    main()
