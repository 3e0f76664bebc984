"""Settings: explicit arguments, then ``KEMEM_*`` environment variables, then defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from kemem_es.config_rules import (
    FILE_SETTINGS,
    NOT_A_HEADER_TOKEN,
    PATH_SETTINGS,
    absolute_path,
    is_header_token,
    readable_files,
    setting_file,
    setting_variable,
    settings_error,
    url_credentials,
    usable_url,
)
from kemem_es.errors import InvalidInput

__all__ = ["FILE_SETTINGS", "NOT_A_HEADER_TOKEN", "PATH_SETTINGS", "SessionSettings", "Settings",
           "get_settings", "is_header_token", "setting_file", "setting_variable"]  # fmt: skip


@dataclass(frozen=True)
class SessionSettings:
    """The KEMEM_SESSION_* group (``Settings.session``). ``shares``: dialogue, overview, details."""

    trigger_turns: int = 20
    batch_turns: int = 10
    idle_s: float = 1800.0
    overview_max: int = 10
    max_tokens: int = 2000
    shares: tuple[float, float, float] = (0.5, 0.2, 0.3)
    summary_at: float = 0.8
    tokenizer: Path | None = None
    lease_s: float = 120.0
    sweep_s: float = 60.0


class Settings(BaseSettings):
    """Everything configurable in one place; nothing about a cluster is hard-coded elsewhere."""

    # allow_inf_nan: KEMEM_QUERY_TIMEOUT_S=inf or a NaN threshold would pass every bound.
    # env_ignore_empty: an empty KEMEM_* variable is unset (its default), never "." or "".
    model_config = SettingsConfigDict(
        env_prefix="KEMEM_", extra="ignore", allow_inf_nan=False, env_ignore_empty=True
    )

    # Local engine (used when es_url is unset).
    home: Path = Field(default=Path("~/.kemem"), description="local engine home: jars, data, logs")
    engine_port: int = Field(default=9251, ge=1025, le=9299, description="local node HTTP port")
    engine_heap: str = "1g"
    java_home: Path | None = Field(
        default=None, description="the JDK to run the local node on (else one is looked for)"
    )
    engine_nodes: int = Field(
        default=1, ge=1, le=5, description="local nodes (HTTP ports engine_port and up)"
    )
    engine: Literal["opensearch", "elasticsearch"] = Field(
        default="opensearch",
        description="local node: OpenSearch (default) or an Elasticsearch development node "
        "from Maven Central (no Painless, analysis-common, mapper-extras, reindex)",
    )
    engine_version: Literal["auto", "2.19", "3.5", "8.18", "9.5"] = Field(
        default="auto",
        description="local node release: OpenSearch 3.5 on a JDK 21+, else 2.19; Elasticsearch "
        "9.5 on a JDK 21+, else 8.18 (auto)",
    )

    # A cluster of the user's own.
    es_url: str | None = Field(
        default=None,
        pattern=r"^(https?://[^\s/]+.*)?$",
        description="http(s)://host:port of the cluster (another scheme timed out instead; "
        "empty: the local engine)",
    )
    es_username: str | None = None
    es_password: str | None = None
    es_api_key: str | None = None
    es_ca_certs: Path | None = None
    es_verify_certs: bool = True
    es_timeout_s: float = Field(default=30.0, gt=0, description="writes and admin calls")
    query_timeout_s: float = Field(
        default=3.0, gt=0, description="a whole query, all its engine requests: the chat deadline"
    )
    degrade: bool = Field(
        default=False,
        description="Kemem.query answers no memories (marked degraded, with the reason) when "
        "the engine is down or slow, instead of raising",
    )
    es_max_retries: int = Field(default=1, ge=0, le=5, description="on a dropped connection only")
    es_pool_size: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="connections kept open to the engine, for requests made at once (threads, "
        "the reinforcement flusher, async verbs)",
    )
    dialect: Literal["auto", "elasticsearch", "opensearch"] = "auto"
    scoring: Literal["auto", "native", "script"] = Field(
        default="auto",
        description="the fused score from engine-native parts (knn clause, constant scores, "
        "exp decay, distance_feature: no script on the query path) or from scripts; auto: "
        "native where the cluster has no Painless, else script (docs/engines.md)",
    )
    # at most 200: the longest index name (prefix + "-official-entities-v2-routed") stays well
    # under the engine's 255 bytes (a longer one failed part-way through init)
    index_prefix: str = Field(default="kemem", max_length=200, pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    vector_quantization: Literal["none", "int8"] = Field(
        default="none",
        description="HNSW over int8-quantised vectors for new indices (OpenSearch lucene "
        "encoder sq, Elasticsearch int8_hnsw); final scores still use the float vectors",
    )
    # Shards of new memory indices. Every scope is routed to one shard, so a chat query reads
    # one shard per index whatever the count: more user-db shards mean smaller graphs to search
    # per user (docs/operations.md, "Sizing shards"); the official db routes by agent.
    user_shards: int = Field(default=1, ge=1, le=1024, description="primaries, user db indices")
    official_shards: int = Field(
        default=1, ge=1, le=1024, description="primaries, official db indices"
    )
    replicas: int = Field(default=0, ge=0, le=16, description="replicas of every kemem index")
    default_agent_id: str = Field(
        default="default", min_length=1, description="the agent of Memory API calls that name none"
    )

    # Embedding model: a local ONNX directory, or a hub model id for users with internet.
    model_dir: Path | None = None
    model: str | None = None
    # int8-channel: int8 with one weight scale per output channel, derived once from the fp32
    # file into model_cache_dir (embed.quantize). auto, the default: the store's own variant,
    # else int8-channel where it can be had, else int8 (embed.variant; why: docs/embedders.md,
    # bench/results/2026-11-30-channel and 2026-12-01-auto).
    model_variant: Literal["auto", "int8", "int8-channel", "fp32"] = "auto"
    model_cache_dir: Path | None = Field(
        default=None, description="derived model files (None: ~/.cache/kemem-es/models)"
    )
    # int8: how many texts of one call the model runs side by side, one thread each; fp32: the
    # threads of one run. 0: the machine's cores (int8), onnxruntime's choice (fp32).
    embed_threads: int = Field(default=0, ge=0, description="0: the machine's cores")
    embed_batch: int = Field(default=64, ge=1)
    # An event of several sentences is also embedded sentence by sentence, so that a chat turn
    # about one of them finds it (search.best_sentence); a model run more per such memory.
    sentence_vectors: bool = Field(
        default=True, description="embed each sentence of a multi-sentence event on its own too"
    )
    embed_max_length: int = Field(default=256, ge=8, le=8192)
    # Bring your own embedder (docs/embedders.md): how a local ONNX model's states become one
    # vector, what it is told about a text's role, or a remote OpenAI-compatible service.
    embed_pooling: Literal["mean", "cls", "last"] = Field(
        default="mean", description="mean over tokens, the first ([CLS]) or the last token"
    )
    embed_normalize: bool = Field(default=True, description="L2-normalise every vector")
    embed_query_prefix: str = Field(
        default="", description="put before a query (e5: 'query: ', Qwen3: an instruction)"
    )
    embed_document_prefix: str = Field(
        default="", description="put before a memory's text (e5: 'passage: ')"
    )
    embed_url: str | None = Field(
        default=None,
        description="an OpenAI-compatible embeddings service (…/v1): used instead of ONNX",
    )
    embed_model: str | None = Field(default=None, description="the model name sent to embed_url")
    embed_api_key: SecretStr | None = Field(default=None, description="sent as a Bearer token")
    embed_timeout_s: float = Field(
        default=10.0, gt=0, le=600, description="one embedding call, retries included"
    )
    embed_dim: int | None = Field(
        default=None, ge=1, le=16_384, description="the remote model's dimension (else probed)"
    )

    # Text pipeline: extra jieba words, another lexicon / IDF table, operator overrides.
    user_dict: Path | None = Field(default=None, description="extra jieba user dictionary")
    lexicon_path: Path | None = Field(default=None, description="a lexicon built by kemem-es")
    lexicon_overrides: Path | None = Field(default=None, description="TSV word, assoc, level")
    idf_path: Path | None = Field(default=None, description="IDF table (kemem-es lexicon idf)")

    # Memory lifecycle (dedup on write, recall reinforcement, clean-up).
    dedup_threshold: float = Field(
        default=0.9, gt=0, le=1, description="cosine above which a new fact updates an old one"
    )
    dedup_min_overlap: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="events only: share of the shorter text's words the other must hold to merge",
    )
    dedup_recent_s: float = Field(
        default=30.0,
        ge=0,
        description="how long dedup also compares with this process's own writes, which the "
        "engine's search sees only after its refresh (0: the engine's search alone)",
    )
    reinforce: bool = Field(default=True, description="recalled memories gain strength")
    # An official memory is the agent's, shared by every user of it: strengthened by each
    # user's recall it would be one record every user's reads rewrite (and one user's reads
    # would move another's ranking); on the benchmark store 92-94 % of the writes recalls caused,
    # and their rewrites slowed every user's query (bench/results/2026-11-30-official).
    reinforce_official: bool = Field(
        default=False,
        description="a user's recall also strengthens the agent's official memories (shared by "
        "every user of the agent; off: they keep the strength their operator gave them)",
    )
    reinforce_amount: float = Field(default=15.0, ge=0, description="strength per recall")
    reinforce_flush_s: float = Field(default=1.0, gt=0, description="background flush period")
    # A write re-indexes the whole memory (its vector into the graph, refreshes, merges), and a
    # conversation recalls the same memories turn after turn: with a turn every 5-30 s, 60 s
    # writes 46-26 % fewer (bench/results/2026-11-30-coalesce).
    reinforce_coalesce_s: float = Field(
        default=60.0,
        ge=0,
        description="a memory written by a background flush less than this long ago waits, its "
        "recalls summed into one later write (0: every flush writes every recall)",
    )
    cleanup_cap: int = Field(default=20_000, ge=1, description="a user's memories before trimming")
    cleanup_ratio: float = Field(default=0.2, gt=0, lt=1, description="share of the weakest cut")
    cleanup_inactive_days: float = Field(default=90.0, gt=0)
    cleanup_min_capacity: int = Field(default=1_000, ge=0, description="kept for inactive users")
    cleanup_interval_days: float = Field(default=7.0, ge=0, description="per user, at most")

    # LLM extraction (add(..., infer=True)): any OpenAI-compatible chat-completions endpoint.
    llm_base_url: str | None = Field(
        default=None, description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1"
    )
    llm_model: str | None = None
    llm_api_key: SecretStr | None = Field(default=None, description="sent as a Bearer token")
    llm_timeout_s: float = Field(default=30.0, gt=0, le=600, description="one call, retry included")
    llm_json_mode: bool = Field(
        default=True, description='send response_format={"type": "json_object"}'
    )
    # Query rewriting (QueryParams.rewrite, the "memory_rewrite" role): its own model and
    # deadline; the endpoint and key default to the extractor's.
    rewrite_base_url: str | None = Field(default=None, description="default: llm_base_url")
    rewrite_model: str | None = Field(default=None, description="unset: rewriting is off")
    rewrite_api_key: SecretStr | None = Field(default=None, description="default: llm_api_key")
    rewrite_timeout_s: float = Field(
        default=1.5, gt=0, le=60, description="one rewrite; past it the plain query is searched"
    )
    extract_prompt_path: Path | None = Field(
        default=None, description="the extraction prompt; default: the shipped Chinese prompt"
    )

    # Conversation sessions (short-term memory, the context manager; docs/sessions.md). A turn
    # is one message (one speaker's utterance).
    session_trigger_turns: int = Field(
        default=20, ge=2, le=1000, description="window size that hands its oldest turns over"
    )
    session_batch_turns: int = Field(
        default=10, ge=1, le=1000, description="turns handed to extraction at once (≤ trigger)"
    )
    session_idle_s: float = Field(
        default=1800.0, gt=0, description="a session idle this long ends: its window is flushed"
    )
    session_overview_max: int = Field(
        default=10, ge=0, le=100, description="overview timeline (前情提要): newest events kept"
    )
    session_max_tokens: int = Field(
        default=2000, ge=64, le=1_000_000, description="context() budget when none is given"
    )
    session_share_dialogue: float = Field(
        default=0.5, gt=0, le=1, description="context(): share of the budget for the dialogue"
    )
    session_share_overview: float = Field(
        default=0.2, ge=0, le=1, description="context(): share for the overview timeline"
    )
    session_share_details: float = Field(
        default=0.3, ge=0, le=1, description="context(): share for recalled entities and events"
    )
    session_summary_at: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="compress older turns into the summary when the window passes this share "
        "of the dialogue's budget",
    )
    session_tokenizer: Path | None = Field(
        default=None,
        description="tokenizer.json counting context() tokens (default: the embedding model's; "
        "see docs/sessions.md for its error on Chinese)",
    )
    session_lease_s: float = Field(
        default=120.0, gt=0, le=3600, description="how long a worker holds a batch to extract"
    )
    session_sweep_s: float = Field(
        default=60.0,
        ge=0,
        description="how often a server ends idle sessions and resumes open batches (0: never)",
    )

    # The OpenAI-compatible proxy of kemem-es serve (/v1/chat/completions, /v1/responses;
    # docs/proxy.md): the model it forwards to, and how recalled memories are injected.
    proxy_upstream_url: str | None = Field(
        default=None, description="the upstream's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    proxy_upstream_key: SecretStr | None = Field(
        default=None, repr=False, description="sent upstream as a Bearer token; never logged"
    )
    proxy_template: str = Field(
        default="以下是你记得的关于用户的事（自然地参考，不要逐条复述）：\n{memories}",
        description="the injected memory text; {memories} is context()'s text",
    )
    proxy_position: Literal["system_end", "system_start", "before_last_user"] = Field(
        default="system_end",
        description="where it goes: the end or start of the first system message (one is "
        "added when there is none), or a system message just before the last user turn",
    )
    proxy_timeout_s: float = Field(
        default=300.0, gt=0, le=3600, description="one upstream call, the whole stream included"
    )

    # HTTP server (kemem-es serve).
    server_api_keys: dict[str, list[str]] | None = Field(
        default=None,
        repr=False,
        description='API key → agent ids it may serve ("*": all), as JSON; unset: no auth',
    )
    server_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="without API keys: Host names served besides localhost and IP addresses "
        '(JSON list; "*": any), against DNS rebinding',
    )
    server_degrade: bool = Field(
        default=True, description="/query answers empty (degraded) when the engine is down"
    )
    server_max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="largest request body (413 above)"
    )
    server_max_inflight: int = Field(
        default=256, ge=1, description="requests handled at once; more get 429 + Retry-After"
    )
    server_gc_freeze: bool = Field(
        default=True,
        description="after warm-up, move the loaded heap out of the garbage collector's walks "
        "(gc.freeze; server/heap.py)",
    )
    server_gc_gen0: int = Field(
        default=20_000,
        ge=0,
        description="with server_gc_freeze: allocations between young garbage collections "
        "(0: Python's default, 700)",
    )

    @field_validator("llm_api_key", "proxy_upstream_key", "embed_api_key", "rewrite_api_key")
    @classmethod
    def _header_safe_key(cls, key: SecretStr | None) -> SecretStr | None:
        """The key goes into an HTTP header: anything but printable ASCII would fail every
        extraction later (an encoding error, a protocol error), not say what is wrong."""
        if key is not None and not is_header_token(key.get_secret_value()):
            raise ValueError(NOT_A_HEADER_TOKEN)  # never the key itself
        return key

    @field_validator("es_url", "embed_url", "rewrite_base_url")
    @classmethod
    def _usable_url(cls, url: str | None) -> str | None:
        """A URL the clients can use: no stray space (it passed the pattern, then failed deep in
        a client), a numeric port. Never quotes the URL: it may hold a password."""
        return usable_url(url)

    @model_validator(mode="after")
    def _expand_paths(self) -> Settings:
        # Absolute, against the working directory: a relative home once made Maven write the
        # engine's jars into the installed package (it resolves paths against the pom's folder).
        self.home = absolute_path(self.home)
        for name in PATH_SETTINGS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, absolute_path(value))
        return self

    @model_validator(mode="after")
    def _url_credentials(self) -> Settings:
        """``http://user:pass@host:9200``: the credentials become basic auth (the first request,
        made with urllib, would read ``user:pass@host`` as a host name)."""
        url_credentials(self)
        return self

    @model_validator(mode="after")
    def _readable_files(self) -> Settings:
        """The files the text pipeline and the TLS context read: checked now, named, not at
        first use deep in the tokenizer (a server said ready, then failed every request)."""
        readable_files(self)
        return self

    @model_validator(mode="after")
    def _session_batches(self) -> Settings:
        if self.session_batch_turns > self.session_trigger_turns:
            raise ValueError(
                "session_batch_turns: must not exceed KEMEM_SESSION_TRIGGER_TURNS "
                f"({self.session_batch_turns} > {self.session_trigger_turns})"
            )
        return self

    @property
    def session(self) -> SessionSettings:
        """The session group (KEMEM_SESSION_*) as one object."""
        return SessionSettings(
            trigger_turns=self.session_trigger_turns,
            batch_turns=self.session_batch_turns,
            idle_s=self.session_idle_s,
            overview_max=self.session_overview_max,
            max_tokens=self.session_max_tokens,
            shares=(
                self.session_share_dialogue,
                self.session_share_overview,
                self.session_share_details,
            ),
            summary_at=self.session_summary_at,
            tokenizer=self.session_tokenizer,
            lease_s=self.session_lease_s,
            sweep_s=self.session_sweep_s,
        )

    @property
    def local_url(self) -> str:
        return f"http://127.0.0.1:{self.engine_port}"

    @property
    def url(self) -> str:
        """The cluster to talk to: the user's own, else the local node."""
        return self.es_url or self.local_url


def get_settings(**overrides: Any) -> Settings:
    """Settings with explicit overrides (None values are ignored so CLI defaults fall through)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise settings_error(exc, given) from None
    except SettingsError as exc:  # a complex setting (list, dict) that is not JSON
        match = re.search(r'field "(\w+)"', str(exc))
        name = setting_variable(match.group(1)) if match else "a KEMEM_* setting"
        kind = "list" if match and match.group(1) == "server_allowed_hosts" else "value"
        problem = (
            f'{name}: must be a JSON {kind} (e.g. ["memory.lan"])'
            if kind == "list"
            else (f"{name}: must be JSON")
        )
        raise InvalidInput(f"configuration: {problem}", [problem], field=name) from None
