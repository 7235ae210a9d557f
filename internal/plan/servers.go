package plan

// Server is a Raft server: ID is the node name, Addr its QUIC address
// (host:port).
type Server struct {
	ID   string
	Addr string
}

// ConfigServer is a server of a Raft configuration with its suffrage.
type ConfigServer struct {
	ID, Addr string
	// Suffrage is SuffrageVoter, SuffrageNonvoter or SuffrageStaging.
	Suffrage string
}

// Suffrage values of ConfigServer.
const (
	SuffrageVoter    = "voter"
	SuffrageNonvoter = "nonvoter"
	SuffrageStaging  = "staging"
)

// Roles reported by Status.Role.
const (
	RoleLeader   = "leader"
	RoleVoter    = "voter"
	RoleNonvoter = "nonvoter"
	RoleNone     = "none"
)
