"""The tooling's base: the AWS limits it checks (:mod:`.tool_limits`), the JSON Lines reader of its input files and
logs (:mod:`.json_lines`), and a run's throughput and peak memory (:mod:`.run_figures`). Imports nothing of the
tooling's own."""
