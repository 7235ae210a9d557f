package fsm

// NewDetachConsumer detaches consumer from job (absent is not an error).
// ErrUnknownJob if there is no such job. Result: bool, whether it was
// attached. Version 2 (this one) also remembers the consumer as detached
// for the job's ConsumerTTL (Job.Detached), so that its heartbeats still
// on their way do not attach it again; version 1 did not.
func NewDetachConsumer(job, consumer string) Command {
	return newCommand(TypeDetachConsumer, 2, consumerBody{Job: job, Consumer: consumer})
}

func applyDetachConsumer(s *State, c Command) (any, error) {
	var b consumerBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if c.Version >= 2 && !j.Group {
		rememberDetached(j, b.Consumer, c.At)
	}
	if _, ok := j.Consumers[b.Consumer]; !ok {
		return false, nil
	}
	delete(j.Consumers, b.Consumer)
	delete(j.ConsumerMetrics, b.Consumer)
	if j.Dynamic != nil {
		j.Dynamic.Depart(b.Consumer)
	}
	departLocalWorker(j, b.Consumer)
	if len(j.Consumers) == 0 {
		j.NoConsumersSince = c.At
	}
	return true, nil
}

// rememberDetached records consumer in j.Detached, making room by
// forgetting the oldest (then smallest id) at maxJobConsumers.
func rememberDetached(j *Job, consumer string, at int64) {
	if j.Detached == nil {
		j.Detached = map[string]int64{}
	}
	if _, ok := j.Detached[consumer]; !ok && len(j.Detached) >= maxJobConsumers {
		oldest, first := "", true
		for id, t := range j.Detached {
			if first || t < j.Detached[oldest] || (t == j.Detached[oldest] && id < oldest) {
				oldest, first = id, false
			}
		}
		delete(j.Detached, oldest)
	}
	j.Detached[consumer] = at
}
