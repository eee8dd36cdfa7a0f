"""What every command shares above the engine: the settings objects checked once
(:mod:`.settings`: ``Design``, ``Run``) and the one measure runner (:mod:`.evaluate`)."""
