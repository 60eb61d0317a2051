package lab

import "testing"

// parseStaticRoutes reads ovn-nbctl's JSON table: an empty output_port is
// an empty set, external_ids a map.
func TestParseStaticRoutes(t *testing.T) {
	text := `{"data":[[["uuid","8042dc28-0153-4289-b246-653b699641fa"],"10.128.0.0/14","100.64.0.1",["set",[]],["map",[]]],` +
		`[["uuid","5ef438fd-d67e-4884-ab6c-1eb4b98ac65f"],"10.99.1.0/24","192.0.2.1","rtoe-GR_node1",["map",[["ovnbgp.io/owner","node1"],["ovnbgp.io/rule","r"]]]]],` +
		`"headings":["_uuid","ip_prefix","nexthop","output_port","external_ids"]}`
	rows, err := parseStaticRoutes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	if r := rows[0]; r.UUID != "8042dc28-0153-4289-b246-653b699641fa" || r.Prefix != "10.128.0.0/14" || r.NextHop != "100.64.0.1" || r.OutputPort != "" || len(r.ExternalID) != 0 {
		t.Errorf("row 0: %+v", r)
	}
	if r := rows[1]; r.OutputPort != "rtoe-GR_node1" || r.ExternalID["ovnbgp.io/owner"] != "node1" || r.ExternalID["ovnbgp.io/rule"] != "r" {
		t.Errorf("row 1: %+v", r)
	}
	if _, err := parseStaticRoutes(`{"data":[[["uuid","x"],"a"]]}`); err == nil {
		t.Error("a row of 2 columns parsed without error")
	}
}
