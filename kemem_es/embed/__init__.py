"""Sentence embedders: a local ONNX model (directory or hub model id, loaded once per
settings) or a remote OpenAI-compatible ``/v1/embeddings`` service (``remote``), and the
calibration of the model's vector scale (``calibrate``)."""

from kemem_es.embed.onnx import Embedder, EmbedderError, download_model, load_embedder

__all__ = ["Embedder", "EmbedderError", "download_model", "load_embedder"]
