"""Built-in measures. Each module is a plugin registered through ``gpurisk_register_measures``,
exactly like a third-party plugin (see :data:`gpurisk.plugins.BUILTIN_PLUGINS`)."""
