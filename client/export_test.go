package client

// LocalAhead is localAhead, for the external tests' accounting of what a
// killed consumer's process held.
const LocalAhead = localAhead
