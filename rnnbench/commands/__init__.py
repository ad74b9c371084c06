"""One module per `rnnbench` subcommand: `add_arguments(parser)` and `run(args) -> int`."""
