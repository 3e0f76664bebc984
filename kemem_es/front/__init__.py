"""The rooms behind ``Kemem``'s front door (kemem.py): the parts it builds on first use
(``parts``), recall (``recall``), conversation sessions (``dialogue``), background work and
shutdown (``lifecycle``), the Memory API's verbs (``memory_verbs``) and indexing
(``indexing``). Each verb is a short delegation to the store, the searcher or the memory
service; ``Kemem`` is these mixins together."""
