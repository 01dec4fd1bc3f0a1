package relay

import (
	"errors"
	"time"
)

// Defaults of the archive's zero Config fields.
const (
	DefaultMaxFirstEpoch = 1 << 32
	DefaultAccountQuota  = 256 << 20
	DefaultMaxPageBytes  = 4 << 20
)

// DefaultTimeGranularity is the default of Config.TimeGranularity.
const DefaultTimeGranularity = time.Second

// MaxTimeGranularity is the coarsest Config.TimeGranularity: seats order
// device revocations against entry times to that grain.
const MaxTimeGranularity = time.Second

// archiveDefaults fills and checks the Config fields the archive applies.
func archiveDefaults(cfg *Config) error {
	if cfg.AccountQuota < 0 || cfg.MaxPageBytes < 0 || cfg.OrgBudget < 0 || cfg.GroupBudget < 0 || cfg.ServerBudget < 0 {
		return errors.New("relay: negative limit in Config")
	}
	if cfg.TimeGranularity < 0 || cfg.TimeGranularity > MaxTimeGranularity {
		return errors.New("relay: TimeGranularity in Config must be from 0 to a second")
	}
	setDefault(&cfg.TimeGranularity, DefaultTimeGranularity)
	setDefault(&cfg.MaxFirstEpoch, DefaultMaxFirstEpoch)
	setDefault(&cfg.AccountQuota, DefaultAccountQuota)
	setDefault(&cfg.MaxPageBytes, DefaultMaxPageBytes)
	return nil
}
