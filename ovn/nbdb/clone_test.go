package nbdb

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ovn-org/libovsdb/model"
)

// TestCloneModel (issue 19): the generated CloneModel gives what
// libovsdb's copy through encoding/json gave before (the models were
// generated without it), for rows with every kind of column set and
// unset, and the copy shares nothing with the row.
func TestCloneModel(t *testing.T) {
	s, b, n := "x", true, 7
	rows := []model.CloneableModel{
		&LogicalSwitchPort{UUID: "u1", Name: "ns_pod", Addresses: []string{"0a:58:0a:80:00:05 10.128.0.5"}, Dhcpv4Options: &s,
			Enabled: &b, ExternalIDs: map[string]string{"pod": "true", "namespace": "ns"}, Options: map[string]string{"requested-chassis": "node1"},
			PortSecurity: []string{"0a:58:0a:80:00:05 10.128.0.5"}, Tag: &n, Type: "remote"},
		&LogicalSwitchPort{UUID: "u2"},
		&LoadBalancer{UUID: "u3", Name: "lb", Vips: map[string]string{"10.96.0.1:443": "10.0.0.1:6443"}, ExternalIDs: map[string]string{"k": "v"}},
		&LoadBalancer{UUID: "u4"},
		&DHCPOptions{UUID: "u5", ExternalIDs: map[string]string{"k8s.ovn.org/owner-type": "VirtualMachine"}},
		&LogicalSwitch{UUID: "u6", Name: "node1", Ports: []string{"a", "b"}, OtherConfig: map[string]string{"subnet": "10.128.0.0/23"}},
	}
	for _, r := range rows {
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		viaJSON := reflect.New(reflect.TypeOf(r).Elem()).Interface()
		if err := json.Unmarshal(raw, viaJSON); err != nil {
			t.Fatal(err)
		}
		c := r.CloneModel()
		if !reflect.DeepEqual(c, viaJSON) || !reflect.DeepEqual(c, r) {
			t.Errorf("%T: CloneModel %+v, through JSON %+v, row %+v", r, c, viaJSON, r)
		}
		// Change every map, slice and pointer of the copy: the row keeps
		// its values.
		before, _ := json.Marshal(r)
		v := reflect.ValueOf(c).Elem()
		for i := range v.NumField() {
			switch f := v.Field(i); f.Kind() {
			case reflect.Map:
				for _, k := range f.MapKeys() {
					f.SetMapIndex(k, reflect.ValueOf("changed"))
				}
			case reflect.Slice:
				for j := range f.Len() {
					f.Index(j).SetString("changed")
				}
			case reflect.Pointer:
				if !f.IsNil() {
					f.Elem().Set(reflect.Zero(f.Elem().Type()))
				}
			}
		}
		if after, _ := json.Marshal(r); string(after) != string(before) {
			t.Errorf("%T: changing the copy changed the row: %s, was %s", r, after, before)
		}
	}
}
