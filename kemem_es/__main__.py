"""``python -m kemem_es``: the ``kemem-es`` command."""

from kemem_es.cli.app import main

if __name__ == "__main__":
    main()
