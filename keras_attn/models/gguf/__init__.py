"""GGUF files, in one place: the reader (`reader`: the header walked and the metadata
typed before `gguf` maps a file), the tokenizers the metadata describes (`tokenizers`,
`sentencepiece_files`), one record per architecture (`architectures`) that the
families add and `keras_attn.models.from_gguf` reads, and the writer (`writer`) that
`save_gguf` writes a model back with."""

from keras_attn.models.gguf.architectures import ARCHITECTURES as ARCHITECTURES
from keras_attn.models.gguf.architectures import GGUFArchitecture as GGUFArchitecture
from keras_attn.models.gguf.architectures import add_gguf_architecture as add_gguf_architecture
from keras_attn.models.gguf.architectures import gguf_architecture as gguf_architecture
from keras_attn.models.gguf.reader import GGUFFile as GGUFFile
