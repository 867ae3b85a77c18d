"""The command line, ``python -m effectively_once_local`` (:mod:`.main`)."""
