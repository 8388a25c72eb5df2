package train

import (
	"fmt"
	"math"
)

// Schedules of the learning rate.
const (
	Constant = "constant"
	Cosine   = "cosine"
)

// Schedule gives the learning rate of each step.
//
// Steps 1..Warmup ramp linearly from LR/Warmup up to LR. After that the rate is LR (constant)
// or follows half a cosine from LR down to MinLR at step Steps (cosine).
type Schedule struct {
	Kind   string
	LR     float64
	MinLR  float64
	Warmup int
	Steps  int
}

// Validate checks the schedule's settings.
func (s Schedule) Validate() error {
	switch {
	case s.Kind != Constant && s.Kind != Cosine:
		return fmt.Errorf("schedule must be %q or %q, got %q", Constant, Cosine, s.Kind)
	case !(s.LR > 0) || math.IsInf(s.LR, 0):
		return fmt.Errorf("learning rate must be positive, got %v", s.LR)
	case !(s.MinLR >= 0 && s.MinLR <= s.LR):
		return fmt.Errorf("minimum learning rate must be between 0 and the learning rate %v, got %v", s.LR, s.MinLR)
	case s.Warmup < 0:
		return fmt.Errorf("warmup must not be negative, got %d", s.Warmup)
	}
	return nil
}

// At returns the learning rate of step (1-based).
func (s Schedule) At(step int) float64 {
	if step <= s.Warmup {
		return s.LR * float64(step) / float64(s.Warmup)
	}
	if s.Kind != Cosine || s.Steps <= s.Warmup {
		return s.LR
	}
	progress := math.Min(1, float64(step-s.Warmup)/float64(s.Steps-s.Warmup))
	return s.MinLR + 0.5*(s.LR-s.MinLR)*(1+math.Cos(math.Pi*progress))
}
