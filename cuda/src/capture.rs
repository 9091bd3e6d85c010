//! Work that a CUDA graph capture in global mode (PyTorch's default; a program capturing every
//! rank's stream of `ncclCommInitAll`) forbids on every thread not in relaxed mode: a module
//! load, an allocation, some pointer queries fail there, and can cost the caller its capture.
//! [`RelaxedCapture`] lets this thread do such work that touches no stream (a first use's module
//! load, a pointer query) in the middle of someone's capture.

use cudarc::driver::sys::{self, CUresult, CUstreamCaptureMode};

/// The driver's mode exchange: sets this thread's mode, returns the previous one through it.
type Exchange = fn(&mut CUstreamCaptureMode) -> CUresult;

fn driver_exchange(mode: &mut CUstreamCaptureMode) -> CUresult {
    // SAFETY: `mode` is a valid in/out value for the call.
    unsafe { sys::cuThreadExchangeStreamCaptureMode(mode) }
}

/// This thread's stream-capture mode set to relaxed until drop, then restored (the driver's
/// push-pop idiom). Needs the driver loaded (a context exists). If the exchange fails,
/// nothing is restored, since nothing changed.
pub struct RelaxedCapture {
    before: Option<CUstreamCaptureMode>,
    exchange: Exchange,
}

impl RelaxedCapture {
    pub fn enter() -> Self {
        Self::enter_with(driver_exchange)
    }

    fn enter_with(exchange: Exchange) -> Self {
        let mut mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        let ok = exchange(&mut mode) == CUresult::CUDA_SUCCESS;
        Self {
            before: ok.then_some(mode),
            exchange,
        }
    }
}

impl Drop for RelaxedCapture {
    fn drop(&mut self) {
        if let Some(mut mode) = self.before {
            let _ = (self.exchange)(&mut mode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// The fake driver's mode of this thread, and whether its exchange fails.
        static MODE: RefCell<(CUstreamCaptureMode, bool)> =
            const { RefCell::new((CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL, false)) };
    }

    fn fake(mode: &mut CUstreamCaptureMode) -> CUresult {
        MODE.with(|m| {
            let mut m = m.borrow_mut();
            if m.1 {
                return CUresult::CUDA_ERROR_INVALID_VALUE;
            }
            std::mem::swap(&mut m.0, mode);
            CUresult::CUDA_SUCCESS
        })
    }

    fn mode() -> CUstreamCaptureMode {
        MODE.with(|m| m.borrow().0)
    }

    #[test]
    fn relaxed_while_held_then_the_callers_mode_again() {
        use CUstreamCaptureMode::*;
        for before in [
            CU_STREAM_CAPTURE_MODE_GLOBAL,
            CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        ] {
            MODE.with(|m| *m.borrow_mut() = (before, false));
            {
                let _outer = RelaxedCapture::enter_with(fake);
                assert_eq!(mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
                {
                    // Nested (a load inside a load): the inner one restores relaxed.
                    let _inner = RelaxedCapture::enter_with(fake);
                    assert_eq!(mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
                }
                assert_eq!(mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
            }
            assert_eq!(mode(), before);
        }
        // A refused exchange changed nothing, and nothing is written back at drop.
        MODE.with(|m| *m.borrow_mut() = (CU_STREAM_CAPTURE_MODE_GLOBAL, true));
        let g = RelaxedCapture::enter_with(fake);
        MODE.with(|m| m.borrow_mut().1 = false);
        drop(g);
        assert_eq!(mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
    }
}
