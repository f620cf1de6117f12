package config

// Defaults and validation of the admin, webhook and access-log settings.

func (c *Config) setObservabilityDefaults() {}

func (v *validator) observability() {}
