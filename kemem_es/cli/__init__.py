"""The `kemem-es` command line: one module per command group."""
