"""Domain packs, one folder each (see ``envs/packs.py``). Adding a domain is adding a folder here."""
