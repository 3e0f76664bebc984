"""Errors the CLI turns into one clear line (and a non-zero exit) instead of a traceback."""


class KememError(Exception):
    """Base class: the message is meant for the user as is."""


class EngineUnavailable(KememError):
    """The search engine cannot be reached or answered with something unusable."""


class EngineSetupError(KememError):
    """The local engine cannot be installed or started (missing JDK, Maven, port in use...)."""


class MappingConflict(KememError):
    """An existing index was built from an incompatible template; we refuse to mix."""


class InvalidInput(KememError):
    """Input records failed validation; ``problems`` names each line and field."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []
