"""Installs keras_attn: attention layers, Transformer and BERT models for Keras 3."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent

setup(
    name="keras-attn",
    version="0.1.0",
    description=(
        "Attention layers with pluggable scoring, Transformer and BERT models for "
        "Keras 3 on TensorFlow."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_attn", "keras_attn.*"]),
    install_requires=[
        # The pinned working set: TF 2.21 with its matching tensorflow-text minor version.
        "tensorflow==2.21.*",
        "tensorflow-text==2.21.*",
        "keras>=3.15,<4",
        "keras-hub>=0.32,<0.33",
        "tensorboard==2.21.*",
        "numpy",
        "safetensors>=0.4",  # reads Hugging Face checkpoints (BertBackbone.from_pretrained)
        "pyyaml>=6",  # run configurations (keras_attn/training/configs/*.yaml)
        "matplotlib>=3.7",  # attention heat maps (keras_attn.visualize, TensorBoard images)
        "tqdm>=4.60",  # the progress bar of batch prediction (keras-attn predict --input)
        # TF Serving's protos: warm-up records (PredictionLog), models.config, client requests.
        "tensorflow-serving-api==2.21.*",
    ],
    entry_points={"console_scripts": ["keras-attn = keras_attn.cli.main:console"]},
    extras_require={
        "test": [
            "pytest>=8",
            "ruff==0.17.6",  # `make test` runs `ruff check` and `ruff format --check` first
            "pytest-timeout",
            "pytest-xdist>=3.5",  # `make test` runs on both cores (-n 2)
            # The independent reference implementations; torch 2.13.0 is the CPU wheel.
            "torch==2.13.0",
            "transformers>=4.50",
            "sentence-transformers>=5",
            # BLEU of the translation examples, entity F1 of the NER example (and their tests).
            "sacrebleu==2.6.0",
            "seqeval==1.2.2",
        ],
    },
)
