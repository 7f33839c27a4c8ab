//! A loaded machine for the calibration: CPU hogs of its own, started and
//! stopped with the measurement, so that "how precise is it when the system
//! under test loads the CPU?" has a number beside the idle one.

use std::process::{Child, Command, Stdio};

use crate::model::protocol::PARENT_ENV;

/// `n` processes that spin on the CPU at ordinary priority, as `yes >
/// /dev/null` does, until dropped. Each dies with this process as well
/// (PR_SET_PDEATHSIG): an interrupted calibration leaves none behind.
pub struct Hogs(Vec<Child>);

impl Hogs {
    pub fn start(n: usize) -> std::io::Result<Hogs> {
        let exe = std::env::current_exe()?;
        let mut hogs = Hogs(Vec::new());
        for _ in 0..n {
            let child = Command::new(&exe)
                .arg("calibrate-hog")
                .env(PARENT_ENV, std::process::id().to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()?;
            hogs.0.push(child);
        }
        // Let them reach the CPU before anything is measured.
        std::thread::sleep(std::time::Duration::from_millis(200));
        Ok(hogs)
    }

    pub fn count(&self) -> usize {
        self.0.len()
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `leasequake calibrate-hog` (hidden): spin until killed.
pub fn spin() -> u8 {
    if !crate::child::tie_to_parent() {
        return 1;
    }
    loop {
        std::hint::spin_loop();
    }
}

/// As many hogs as the machine has cores: every core busy.
pub fn default_hogs() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}
