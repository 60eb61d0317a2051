package model

import "testing"

// TestNorthdVersion: releases compare by major, then minor; an unknown
// version is never at least anything, and takes no mixed-family route.
func TestNorthdVersion(t *testing.T) {
	for _, tt := range []struct {
		v     NorthdVersion
		s     string
		mixed bool
	}{
		{NorthdVersion{}, "unknown", false},
		{NorthdVersion{Raw: "garbage"}, "unknown", false},
		{NorthdVersion{Major: 24, Minor: 3}, "24.03", false},
		{NorthdVersion{Major: 24, Minor: 9}, "24.09", false},
		{NorthdVersion{Major: 24, Minor: 12}, "24.12", false},
		{NorthdVersion{Major: 25, Minor: 0}, "25.00", false},
		{NorthdVersion{Major: 25, Minor: 3}, "25.03", true},
		{NorthdVersion{Major: 25, Minor: 9}, "25.09", true},
		{NorthdVersion{Major: 26, Minor: 0}, "26.00", true},
	} {
		if got := tt.v.String(); got != tt.s {
			t.Errorf("%+v: String %q, want %q", tt.v, got, tt.s)
		}
		if got := tt.v.MixedFamilyRoutes(); got != tt.mixed {
			t.Errorf("%+v: MixedFamilyRoutes %v, want %v", tt.v, got, tt.mixed)
		}
	}
}
