// Package chaos holds the fault tests of the service: `aether serve`
// processes killed with SIGKILL while webhook deliveries and exports are in
// flight, PostgreSQL stopped and started under load, and two processes on
// one database of which one dies. The tests build the real binary and run it
// against a private PostgreSQL cluster; docs/faults.md describes what each
// scenario promises and how it is checked. The package has no code besides
// its tests.
package chaos
