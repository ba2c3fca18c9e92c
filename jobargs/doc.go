// Package jobargs holds the arguments of every River job and the names of
// the queues they run in: the outbox work that use cases enqueue in their
// own transactions (webhook fan-outs and deliveries, export runs and the
// deletion of expired objects) and the periodic maintenance jobs. It is a
// leaf: app enqueues these values, jobs works them, and neither needs the
// other for it.
package jobargs
