"""What every command line shares (``lsmkv``, ``lsmkv kafka``, ``lsmkv
spark``, ``lsmkv bench``): the lossless text form of keys and values
(textcodec.py), keys and values as arguments and entries as lines
(cli_entries.py), and a command whose stdout reader went away
(closed_pipe.py).

It sits below every command-line module, so that the integrations'
commands use it without importing the ``lsmkv`` command (lsmkv/cli/),
which dispatches to them. It imports no engine.
"""
