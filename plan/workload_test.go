package plan

import "time"

// testNow is the time of the tests' advertisements that do not depend on
// it: no workload address is handed over.
var testNow = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
