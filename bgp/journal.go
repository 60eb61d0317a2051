package bgp

import (
	"net/netip"
	"sync"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// journal is what peers sent since the last TakeLearned: the latest state of
// every (peer, prefix) that changed, and the peers whose whole table must be
// read again. It is fed by gobgp's event goroutine (one event at a time, in
// gobgp's order) and drained by TakeLearned; each event costs O(paths in it).
type journal struct {
	mu sync.Mutex
	// paths are the keys whose latest state is a path, gone those whose
	// latest state is a withdrawal: apart, so that a session's drop
	// (100k withdrawals) is a map of keys, not of 230-byte entries, and
	// takes 4 MB and a few ms to hand over, not 23 MB and 15 ms.
	paths  map[model.Key]model.LearnedPath
	gone   map[model.Key]struct{}
	resync map[string]struct{}
	// spare and spareGone are emptied maps, reused by the next take so
	// that a steady flow of changes does not regrow a map every time.
	spare     map[model.Key]model.LearnedPath
	spareGone map[model.Key]struct{}
	// off: nobody takes deltas (TrackLearned(false)); paths are neither
	// converted nor kept, and their events poke nobody.
	off bool
}

func newJournal() *journal {
	return &journal{paths: map[model.Key]model.LearnedPath{}, gone: map[model.Key]struct{}{}, resync: map[string]struct{}{}}
}

// markResync puts peers into Resync.
func (j *journal) markResync(peers ...string) {
	j.mu.Lock()
	if !j.off {
		for _, p := range peers {
			j.resync[p] = struct{}{}
		}
	}
	j.mu.Unlock()
}

// take returns the delta and starts a new one.
func (j *journal) take() model.LearnedDelta {
	j.mu.Lock()
	paths, gone, resync := j.paths, j.gone, j.resync
	if len(paths) == 0 && len(gone) == 0 && len(resync) == 0 {
		j.mu.Unlock()
		return model.LearnedDelta{}
	}
	j.paths, j.gone, j.resync = j.spare, j.spareGone, map[string]struct{}{}
	j.spare, j.spareGone = nil, nil
	if j.paths == nil {
		j.paths = map[model.Key]model.LearnedPath{}
	}
	if j.gone == nil {
		j.gone = map[model.Key]struct{}{}
	}
	j.mu.Unlock()

	var d model.LearnedDelta
	if len(paths) > 0 {
		d.Paths = make([]model.LearnedPath, 0, len(paths))
		for _, p := range paths {
			d.Paths = append(d.Paths, p)
		}
	}
	if len(gone) > 0 {
		d.Gone = make([]model.Key, 0, len(gone))
		for k := range gone {
			d.Gone = append(d.Gone, k)
		}
	}
	for p := range resync {
		d.Resync = append(d.Resync, p)
	}
	// A table transfer's map is let go, not its memory.
	if len(paths) > spareMax {
		paths = nil
	}
	if len(gone) > spareMax {
		gone = nil
	}
	clear(paths)
	clear(gone)
	j.mu.Lock()
	if j.spare == nil {
		j.spare = paths
	}
	if j.spareGone == nil {
		j.spareGone = gone
	}
	j.mu.Unlock()
	return d
}

// spareMax is the largest delta whose map is kept for reuse: a cleared
// map keeps its size, and one that held a table transfer (~230 B per
// entry) would sit on megabytes for good.
const spareMax = 4096

// TakeLearned returns what peers sent since the previous call and starts a
// new delta: per (peer, prefix) its latest state only, O(changes), built
// from gobgp's events with the same conversion as EachLearned (a path of
// the delta is equal, field by field, to what a walk returns for its key).
//
// The caller keeps a table of learned paths up to date with it this way,
// and never loses a change:
//
//  1. d := TakeLearned()
//  2. apply d.Paths (replace) and d.Gone (delete);
//  3. for each peer of d.Resync, read its table with EachLearned (after
//     TakeLearned returned) and replace all of that peer's entries with
//     the walk; a peer that is no longer configured (EachLearned fails with
//     ErrPeerNotConfigured) has no paths.
//
// Why it holds: every Adj-RIB-In change gobgp makes either comes as an
// event carrying the paths, or is followed, in the same ordered event
// stream, by an event that puts the peer in Resync (see doc.go for the
// table), or happens inside the same gobgp critical section as such an
// event (End-of-RIB, then the drop of the stale paths), which a walk can
// only read after. A path event queued before a walk but delivered after
// it can leave an entry older than the walk for a while: whatever changed
// the key since has its own later event, or a later Resync, so the table
// converges to the Adj-RIB-In. The exception (no event, no Resync) is in
// doc.go: paths gobgp's own loop checks reject.
func (s *Speaker) TakeLearned() model.LearnedDelta { return s.journal.take() }

// TrackLearned says whether the caller takes deltas (TakeLearned), which a
// speaker does from its start. Off, what peers send is neither converted
// nor kept for a delta (without import rules nobody takes one, and the
// journal would hold a copy of every path a peer ever sent: a ToR reflects
// every advertised prefix back), and a path event no longer calls notify
// (a peer state change or an End-of-RIB still does). Walks (EachLearned)
// read gobgp's table and are not affected. Turned on again, every peer is
// in the next delta's Resync: walk them before trusting the deltas.
func (s *Speaker) TrackLearned(on bool) {
	j := s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.off == !on {
		return
	}
	j.off = !on
	if !on {
		j.paths, j.gone, j.spare, j.spareGone, j.resync = map[model.Key]model.LearnedPath{}, map[model.Key]struct{}{}, nil, nil, map[string]struct{}{}
		return
	}
	s.sess.mu.Lock()
	for _, p := range s.sess.learnFrom {
		j.resync[p.Name] = struct{}{}
	}
	s.sess.mu.Unlock()
}

// onPaths records the paths of one gobgp event: an UPDATE a peer sent
// (before policy), or paths gobgp dropped from an Adj-RIB-In itself.
func (s *Speaker) onPaths(paths []*apiutil.Path) {
	tracked := true
	if len(paths) > 0 {
		tracked = s.journalPaths(paths)
	}
	if tracked {
		s.learnedChanged()
	}
}

// journalPaths records paths, and says whether the journal is on
// (TrackLearned); off, it only counts announcements for the prefix limits.
func (s *Speaker) journalPaths(paths []*apiutil.Path) (tracked bool) {
	var conv attrCache
	var (
		lastAddr netip.Addr
		peer     config.Peer
		known    bool
		bound    *prefixBound
		wake     bool
		// up: the session is Established as far as the speaker knows,
		// and graceful restart was negotiated in it (its paths may be
		// kept stale when it ends)
		up bool
	)
	j := s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	defer func() {
		if wake {
			s.limit.wake()
		}
	}()
	for _, p := range paths {
		if p == nil {
			continue
		}
		if addr := p.PeerAddress.Unmap(); addr != lastAddr || !lastAddr.IsValid() {
			lastAddr = addr
			s.sess.mu.Lock()
			peer, known = s.sess.learnFrom[addr]
			bound = s.sess.bounds[addr]
			up = false
			if ss := s.sess.all[addr]; ss != nil && ss.state == model.StateEstablished {
				ss.lastUpdate = time.Now()
				up = ss.gr != nil
			}
			s.sess.mu.Unlock()
		}
		if !known {
			// A peer SetPeers deleted (gobgp drops its paths after it
			// is gone): SetPeers put it into Resync by name already.
			continue
		}
		if !p.Withdrawal && bound != nil {
			// The Adj-RIB-In upper bound (prefixlimit.go): O(1).
			fi := pathFamIdx(p)
			if bound.announced[fi].Add(1) >= bound.trigger[fi].Load() {
				wake = true
			}
		}
		if j.off {
			continue
		}
		prefix, ok := nlriPrefix(p.Nlri)
		if !ok {
			// Cannot happen with the unicast families ovnbgp configures;
			// if it does, the walk decides.
			j.resync[peer.Name] = struct{}{}
			continue
		}
		k := model.Key{Peer: peer.Name, Prefix: prefix}
		if p.Withdrawal && up && len(p.Attrs) > 0 {
			// Dropped by gobgp itself, not withdrawn by the peer: a
			// withdrawn NLRI carries no attributes, a path gobgp drops
			// from its Adj-RIB-In keeps them. While the speaker still
			// sees the session Established (with graceful restart: a
			// peer without it keeps nothing, and its drop is reported
			// at once, as cheap as a withdrawal), this is its end (gobgp
			// v4.8.0 drops the Adj-RIB-In, then reports the state in the
			// same handling: handleFSMMessage) or the peer's removal
			// (deleteNeighbor, then Idle; SetPeers puts it in Resync),
			// and that state event puts the peer in Resync: its walk
			// says the path is gone. (The stale paths an End-of-RIB
			// drops come with no path event; the End-of-RIB's Resync
			// covers them.) Reported now, the daemon would take the drop
			// before it knows how the session ended, and delete routes
			// that a graceful restart keeps.
			continue
		}
		if p.Withdrawal {
			delete(j.paths, k)
			j.gone[k] = struct{}{}
			continue
		}
		delete(j.gone, k)
		j.paths[k] = s.learnedPath(peer, prefix, p, &conv)
	}
	return !j.off
}

// resyncAddr puts the peer at addr into Resync (a session or End-of-RIB
// event): its whole table is read again.
func (s *Speaker) resyncAddr(addr netip.Addr) {
	s.sess.mu.Lock()
	peer, ok := s.sess.learnFrom[addr]
	s.sess.mu.Unlock()
	if ok {
		s.journal.markResync(peer.Name)
	}
}

// ageOf is a gobgp path's age as LearnedPath reports it.
func ageOf(p *apiutil.Path) time.Time {
	if p.Age > 0 {
		return time.Unix(p.Age, 0)
	}
	return time.Time{}
}
