//! The task state machine (docs/protocol.md §7 Task states).

use super::CoreError;
use a2a_proto::types::State;

/// Checks a move: `A2A_TASK_TERMINAL` out of a terminal state, else
/// `A2A_INVALID_TRANSITION` for any move the table does not allow.
pub fn check_move(from: State, to: State) -> Result<(), CoreError> {
    if from.is_terminal() {
        return Err(CoreError::TaskTerminal(from));
    }
    if !from.can_move(to) {
        return Err(CoreError::InvalidTransition { from, to });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    #[test]
    fn table_of_section_6() {
        // Submitted and working may move anywhere but back to submitted.
        let open: Vec<State> = State::ALL.into_iter().filter(|s| *s != Submitted).collect();
        let open = open.as_slice();
        let allowed: &[(State, &[State])] = &[
            (Submitted, open),
            (Working, open),
            (InputRequired, &[Working, Canceled, Failed, Rejected]),
            (AuthRequired, &[Working, Canceled, Failed, Rejected]),
            (Completed, &[]),
            (Canceled, &[]),
            (Failed, &[]),
            (Rejected, &[]),
        ];
        for (from, tos) in allowed {
            for to in State::ALL {
                assert_eq!(from.can_move(to), tos.contains(&to), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn terminal_is_reported_before_invalid() {
        assert_eq!(
            check_move(Completed, Working),
            Err(CoreError::TaskTerminal(Completed))
        );
        assert_eq!(
            check_move(InputRequired, Completed),
            Err(CoreError::InvalidTransition {
                from: InputRequired,
                to: Completed
            })
        );
        assert_eq!(
            check_move(Working, Submitted),
            Err(CoreError::InvalidTransition {
                from: Working,
                to: Submitted
            })
        );
        assert!(check_move(Working, Working).is_ok());
    }
}
