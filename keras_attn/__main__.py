"""`python -m keras_attn`: the main job (for now, the sequence-reversal demo)."""

from keras_attn.cli.demo import main

if __name__ == "__main__":
    main()
