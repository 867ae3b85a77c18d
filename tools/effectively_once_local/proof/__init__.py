"""The proof's checks: what the platform's logs say of each message and kill (:mod:`.attribution`), the per-key check
and every input line's state (:mod:`.key_check`), and effects counted from the stores themselves (:mod:`.stores`)."""
