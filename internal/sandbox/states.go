package sandbox

import "fmt"

// State is a sandbox's lifecycle state as the API reports it.
type State string

// The lifecycle states (mission.md). Transient states (pausing, resuming,
// snapshotting, killing) mark an operation in progress: holding one is the
// claim that keeps two operations off one sandbox.
const (
	StateCreating     State = "creating"
	StateRunning      State = "running"
	StatePausing      State = "pausing"
	StatePaused       State = "paused"
	StateResuming     State = "resuming"
	StateSnapshotting State = "snapshotting"
	StateKilling      State = "killing"
	StateKilled       State = "killed"
)

// transitions is the whole lifecycle: a move not listed here is a bug in
// the caller (see mustTransition) or, for user requests, a conflict.
var transitions = map[State][]State{
	StateCreating: {StateRunning, StateKilling, StateKilled},
	// running → resuming is a rollback: the sandbox is restored in place.
	StateRunning:      {StatePausing, StateSnapshotting, StateResuming, StateKilling, StateKilled},
	StatePausing:      {StatePaused, StateRunning, StateKilling, StateKilled},
	StatePaused:       {StateResuming, StateKilling, StateSnapshotting},
	StateResuming:     {StateRunning, StatePaused, StateKilling, StateKilled},
	StateSnapshotting: {StateRunning, StatePaused, StateKilling, StateKilled},
	StateKilling:      {StateKilled},
	StateKilled:       {},
}

// CanTransition reports whether the lifecycle allows from → to.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// mustTransition panics on a move the table forbids: callers check
// CanTransition first, so reaching this is a programming error, not bad input.
func mustTransition(from, to State) {
	if !CanTransition(from, to) {
		panic(fmt.Sprintf("sandbox: impossible transition %s → %s", from, to))
	}
}

// PublicState is a state as the E2B API shows it: clients know only
// running and paused (and killed, in lineage trees).
type PublicState string

// The public states.
const (
	PublicRunning PublicState = "running"
	PublicPaused  PublicState = "paused"
	PublicKilled  PublicState = "killed"
)

// Public reports the state the E2B API shows: transient states are shown as
// where they are heading or coming from.
func (s State) Public() PublicState {
	switch s {
	case StatePausing, StatePaused, StateResuming:
		return PublicPaused
	case StateKilling, StateKilled:
		return PublicKilled
	default:
		return PublicRunning
	}
}

// states returns the precise states a public state stands for.
func (p PublicState) states() ([]State, bool) {
	switch p {
	case PublicRunning:
		return []State{StateCreating, StateRunning, StateSnapshotting}, true
	case PublicPaused:
		return []State{StatePausing, StatePaused, StateResuming}, true
	default:
		return nil, false
	}
}

// Origin is the operation that made a sandbox or a snapshot; it is kept in
// the record for the lineage tree. Nothing decides from it.
type Origin string

// The origins.
const (
	// OriginCreate: a sandbox created from a template.
	OriginCreate Origin = "create"
	// OriginRestore: a sandbox created from a snapshot.
	OriginRestore Origin = "restore"
	// OriginClone: a sandbox copied by fork/clone, or the snapshot made for it.
	OriginClone Origin = "clone"
	// OriginSnapshot: a snapshot a user asked for.
	OriginSnapshot Origin = "snapshot"
)

// Live reports whether a sandbox in this state still holds runtime resources
// or a stored image (everything but killed).
func (s State) Live() bool { return s != StateKilled }
