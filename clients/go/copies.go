package assignd

// awaitAnswersMax is how many answers a copy the host stopped listing is
// kept while the member's epoch stays put.
const awaitAnswersMax = 10

// copies are warm copies of one kind (learners or standbys) as the
// application was told them.
//
// When a learner catches up, the host's next target makes the task active
// here but grants it only once its old owner released it; meanwhile the
// answers list it neither as learner nor as active. So a copy the answers
// stop listing is kept (still warming, its lag still reported, which keeps
// the host's learner safety satisfied) until it is granted (promoted), an
// answer at a higher member epoch leaves it out, or awaitAnswersMax
// answers went by (then it is stopped).
type copies struct {
	told taskSet
	// awaiting: told copies the answers no longer list, with the member
	// epoch of the answer that dropped each and how many more answers it
	// may wait.
	awaiting map[Task]awaitingCopy
}

type awaitingCopy struct {
	droppedAt int64
	left      int
}

func newCopies() copies {
	return copies{told: taskSet{}, awaiting: map[Task]awaitingCopy{}}
}

// update applies an answer's list at member epoch epoch; granted tasks
// became active here and leave without a stop. It returns the copies
// started and stopped.
func (c *copies) update(listed, granted taskSet, epoch int64) (started, stopped taskSet) {
	started = listed.filter(func(t Task) bool { return !c.told.has(t) })
	stopped = taskSet{}
	dropped := c.told.filter(func(t Task) bool { return !listed.has(t) && !granted.has(t) })
	for task := range dropped {
		wait, ok := c.awaiting[task]
		if !ok {
			c.awaiting[task] = awaitingCopy{droppedAt: epoch, left: awaitAnswersMax}
			continue
		}
		if wait.left > 0 {
			wait.left--
		}
		if epoch > wait.droppedAt || wait.left == 0 {
			delete(c.awaiting, task)
			stopped.add(task)
		} else {
			c.awaiting[task] = wait
		}
	}
	for task := range c.awaiting {
		if listed.has(task) || granted.has(task) {
			delete(c.awaiting, task)
		}
	}
	c.told = listed.clone()
	for task := range c.awaiting {
		c.told.add(task)
	}
	return started, stopped
}

// promote forgets granted tasks: they are copies no more.
func (c *copies) promote(granted taskSet) {
	c.told.removeAll(granted)
	for task := range granted {
		delete(c.awaiting, task)
	}
}
