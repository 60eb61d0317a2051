// Package nbdb holds the libovsdb models of the OVN Northbound tables ovnbgp
// uses. They are generated from ovn-nb.ovsschema, a subset (see
// ovn/internal/schematrim) of ovn-nb.full.ovsschema, the NB schema 7.0.0 of
// OVN 23.03, the oldest OVN ovnbgp supports. Do not edit the generated files;
// run `make generate`. They are generated -extended: with CloneModel and
// EqualsModel, which libovsdb's cache uses for every row it stores or
// updates; without them it copies each row through encoding/json (11% of
// the CPU of 10,000 pods' switch ports added at once, issue 19).
package nbdb

//go:generate go run ../internal/schematrim -in ovn-nb.full.ovsschema -out ovn-nb.ovsschema
//go:generate go tool modelgen -extended -p nbdb -o . ovn-nb.ovsschema
