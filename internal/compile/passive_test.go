package compile

import (
	"reflect"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Every passive setting of the config reaches the health model: a field
// added to one side and forgotten in the conversion stays zero here.
func TestEveryPassiveSettingReachesTheHealthModel(t *testing.T) {
	off := false
	ps := config.Passive{
		Enabled: &off, Window: config.Duration(time.Second), MinRequests: 2, MinClients: 3,
		FailureRate: 0.4, ConsecutiveConnectFailures: 5, MaxEjected: 0.6,
		EjectTime: config.Duration(7 * time.Second), MaxEjectTime: config.Duration(8 * time.Second),
		SlowStart: config.Duration(9 * time.Second), TrialInterval: config.Duration(10 * time.Second),
		GrayFailure: config.GrayFailure{Enabled: &off, Disagreements: 11, Within: config.Duration(12 * time.Second)},
	}
	var zero func(reflect.Value, string)
	zero = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct {
				zero(f, name+".")
			} else if f.IsZero() {
				t.Errorf("health.Passive.%s is zero: the conversion does not carry it", name)
			}
		}
	}
	zero(reflect.ValueOf(passive(ps)), "")
}
