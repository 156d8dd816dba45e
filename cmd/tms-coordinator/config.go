package main

import "github.com/tms-dev/tms/coordinator/config"

// configPrefix starts every key of serve's configuration file (see
// coordinator/config).
const configPrefix = config.Prefix
