"""bench: the comparison workbench behind ``lsmkv bench``."""
