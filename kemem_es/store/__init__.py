"""The only code that knows index names, field names, record ↔ document mapping, the tenancy
rule, templates, CRUD and history. Engine code only sends requests; search code only builds
query bodies; neither writes documents."""

from kemem_es.store.bulk import BulkWriter, IndexReport
from kemem_es.store.scope import Scope
from kemem_es.store.templates import InitResult, install

__all__ = ["BulkWriter", "IndexReport", "InitResult", "Scope", "install"]
