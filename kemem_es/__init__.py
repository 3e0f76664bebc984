"""kemem-es: memory retrieval for Chinese companion chat on Elasticsearch / OpenSearch."""

from kemem_es.async_kemem import AsyncKemem
from kemem_es.config import Settings
from kemem_es.kemem import Kemem
from kemem_es.models import EntityRecord, EventRecord

__all__ = ["AsyncKemem", "EntityRecord", "EventRecord", "Kemem", "Settings"]
__version__ = "0.1.0"
