"""`python -m keras_attn`: the main job (pre-train, fine-tune, export, predict); see `--help`."""

import sys

from keras_attn.cli.main import start_tensorflow
from keras_attn.cli.main_job import main

if __name__ == "__main__":
    if not {"-h", "--help"} & set(sys.argv[1:]):
        start_tensorflow()  # TensorFlow's start-up lines held back, as in `keras-attn`
    main()
