"""ONNX sentence embedder: local model directory or hub model id, loaded once per settings."""

from kemem_es.embed.onnx import Embedder, EmbedderError, download_model, load_embedder

__all__ = ["Embedder", "EmbedderError", "download_model", "load_embedder"]
