"""Placeholder: `kemem-es expand` and `kemem-es lexicon …` (text pipeline) register here."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
