"""One module per subcommand: its flags and help (`add_arguments`) and its entry (`run`).

These modules are light on purpose: the router builds every subcommand's parser from them, and
each `run` imports the module that does the work only when that command runs, so `snapshot`,
`parse`, `record` and `--help` never load Textual.
"""
