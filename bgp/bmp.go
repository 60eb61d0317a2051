package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// bmpStation is a BMP server as configured in gobgp, with what it was
// configured with.
type bmpStation struct {
	server            config.BMPServer
	sysName, sysDescr string
}

// stationOf is the key gobgp keeps a BMP server by.
func stationOf(s config.BMPServer) netip.AddrPort {
	return netip.AddrPortFrom(s.Address.Unmap(), uint16(s.Port))
}

// bmpPolicy is gobgp's route monitoring policy for m.
func bmpPolicy(m config.BMPMonitoring) api.AddBmpRequest_MonitoringPolicy {
	switch m {
	case config.BMPLocRIB:
		return api.AddBmpRequest_MONITORING_POLICY_LOCAL
	case config.BMPAll:
		return api.AddBmpRequest_MONITORING_POLICY_ALL
	}
	return api.AddBmpRequest_MONITORING_POLICY_PRE
}

// SetBMP makes the BMP servers gobgp streams to exactly servers: it adds
// the new ones, removes those not listed (each gets a Termination message)
// and replaces those whose settings changed. sysName and sysDescr go in the
// Initiation message (RFC 7854 4.3). No BGP session is touched. gobgp
// dials each station itself, and keeps retrying (1 s doubling to 32 s)
// while it does not answer.
func (s *Speaker) SetBMP(ctx context.Context, servers []config.BMPServer, sysName, sysDescr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("bmp: the speaker is stopped")
	}
	want := make(map[netip.AddrPort]bmpStation, len(servers))
	for _, srv := range servers {
		want[stationOf(srv)] = bmpStation{server: srv, sysName: sysName, sysDescr: sysDescr}
	}
	var errs []error
	for ap, have := range s.bmp {
		if w, ok := want[ap]; ok && w == have {
			continue
		}
		if err := s.deleteBMP(ctx, ap); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.bmp, ap)
	}
	for _, ap := range sortedStations(want) {
		w := want[ap]
		if _, ok := s.bmp[ap]; ok {
			continue
		}
		err := s.bgp.AddBmp(ctx, &api.AddBmpRequest{
			Address:           ap.Addr().String(),
			Port:              uint32(ap.Port()),
			Policy:            bmpPolicy(w.server.RouteMonitoring),
			StatisticsTimeout: int32(w.server.StatisticsInterval / time.Second),
			SysName:           sysName,
			SysDescr:          sysDescr,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("bmp server %s (%s): %w", w.server.Name, ap, err))
			continue
		}
		s.bmp[ap] = w
		s.log.Info("bmp station added", zap.String("name", w.server.Name), zap.Stringer("station", ap),
			zap.String("routeMonitoring", string(w.server.RouteMonitoring)))
	}
	return errors.Join(errs...)
}

// deleteBMP removes a BMP server from gobgp; the caller holds mu.
func (s *Speaker) deleteBMP(ctx context.Context, ap netip.AddrPort) error {
	name := s.bmp[ap].server.Name
	if err := s.bgp.DeleteBmp(ctx, &api.DeleteBmpRequest{Address: ap.Addr().String(), Port: uint32(ap.Port())}); err != nil {
		return fmt.Errorf("bmp server %s (%s): remove: %w", name, ap, err)
	}
	s.log.Info("bmp station removed", zap.String("name", name), zap.Stringer("station", ap))
	return nil
}

func sortedStations(m map[netip.AddrPort]bmpStation) []netip.AddrPort {
	keys := make([]netip.AddrPort, 0, len(m))
	for ap := range m {
		keys = append(keys, ap)
	}
	slices.SortFunc(keys, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return keys
}

// BMP is the state of each configured BMP server, in station order.
// gobgp records when a station connected and disconnected to the second:
// a station is up when it connected no earlier than it last disconnected
// (so one that accepts and drops within a second reads as up until its
// next attempt). gobgp's ListBmp waits for the server's loop whatever ctx
// says; BMP gives up at ctx's end and leaves the call to finish alone, as
// a task of the speaker (Stop waits for it).
func (s *Speaker) BMP(ctx context.Context) ([]model.BMPStation, error) {
	s.mu.Lock()
	names := make(map[netip.AddrPort]string, len(s.bmp))
	for ap, st := range s.bmp {
		names[ap] = st.server.Name
	}
	stopped := s.stopped
	s.mu.Unlock()
	if stopped || len(names) == 0 {
		return nil, nil
	}
	type answer struct {
		out []model.BMPStation
		err error
	}
	done := make(chan answer, 1)
	// A task: Stop waits for it (it ends at the latest when gobgp's
	// Serve loop does, which answers every queued call with "server
	// stopped").
	if !s.tasks.goFn(func() {
		out, err := s.listBMP(ctx, names)
		done <- answer{out, err}
	}) {
		return nil, nil // stopped meanwhile
	}
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("list bmp servers: %w", ctx.Err())
	}
}

// listBMP is gobgp's ListBmp in our terms, for the stations in names.
func (s *Speaker) listBMP(ctx context.Context, names map[netip.AddrPort]string) ([]model.BMPStation, error) {
	var out []model.BMPStation
	err := s.bgp.ListBmp(ctx, &api.ListBmpRequest{}, func(r *api.ListBmpResponse_BmpStation) {
		addr, err := netip.ParseAddr(r.GetConf().GetAddress())
		if err != nil {
			return
		}
		ap := netip.AddrPortFrom(addr, uint16(r.GetConf().GetPort()))
		name, ok := names[ap]
		if !ok {
			return
		}
		st := model.BMPStation{Name: name, Station: ap}
		up, down := r.GetState().GetUptime().AsTime(), r.GetState().GetDowntime().AsTime()
		if r.GetState().GetUptime().GetSeconds() > 0 && !up.Before(down) {
			st.Up, st.Since = true, up
		} else if r.GetState().GetDowntime().GetSeconds() > 0 {
			st.Since = down
		}
		out = append(out, st)
	})
	if err != nil {
		return nil, fmt.Errorf("list bmp servers: %w", err)
	}
	slices.SortFunc(out, func(a, b model.BMPStation) int { return a.Station.Compare(b.Station) })
	return out, nil
}

// stopBMP removes every BMP server, so each station gets a Termination
// and gobgp's client goroutines end (BgpServer.Stop leaves them running);
// the caller holds mu or owns s exclusively.
func (s *Speaker) stopBMP(ctx context.Context) {
	for ap := range s.bmp {
		if err := s.deleteBMP(ctx, ap); err != nil {
			s.log.Warn("bmp station not removed", zap.Error(err))
		}
		delete(s.bmp, ap)
	}
}
