//! SETTINGS both ways: what the server announces when the connection
//! starts, and how the peer's parameters change the connection.

use crate::h2::config::Config;
use crate::h2::error::Error;
use crate::h2::frame::settings::Settings;
use crate::h2::frame::{self, setting, Reason, MAX_WINDOW};
use crate::h2::output::Output;
use crate::h2::recv_flow::DEFAULT_WINDOW;
use crate::h2::streams::Streams;

/// Appends the server's SETTINGS, the first frame it sends.
pub(crate) fn write_local(config: &Config, out: &mut Vec<u8>) {
    frame::write_settings(
        out,
        &[
            (
                setting::MAX_CONCURRENT_STREAMS,
                config.max_concurrent_streams,
            ),
            (setting::INITIAL_WINDOW_SIZE, config.initial_stream_window),
            (setting::MAX_FRAME_SIZE, config.max_frame_size),
            (setting::MAX_HEADER_LIST_SIZE, config.max_header_list_size),
        ],
    );
}

/// What the peer's SETTINGS decide that the connection keeps apart from
/// its output.
pub(crate) struct PeerSettings {
    /// SETTINGS_INITIAL_WINDOW_SIZE: the send window of each new stream.
    pub initial_window: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest header list the peer
    /// takes (name + value + 32 per field); unlimited until it says.
    pub max_header_list: usize,
}

impl PeerSettings {
    pub(crate) fn new() -> PeerSettings {
        PeerSettings {
            initial_window: DEFAULT_WINDOW,
            max_header_list: usize::MAX,
        }
    }

    /// Applies the parameters of a SETTINGS frame in order: the header
    /// table size and frame size to the output, a new initial window to
    /// every open stream. The caller acknowledges.
    ///
    /// The initial window changes of one frame are applied to the streams
    /// in one pass, as their sum: a frame of thousands of them costs one
    /// walk over the streams. A window the changes in order would have
    /// taken past 2^31 - 1 on the way is refused as it would have been.
    pub(crate) fn apply(
        &mut self,
        settings: &Settings<'_>,
        streams: &mut Streams,
        output: &mut Output,
    ) -> Result<(), Error> {
        // The highest and the last initial window of the frame.
        let mut windows: Option<(u32, u32)> = None;
        for (id, value) in settings.params() {
            match id {
                setting::HEADER_TABLE_SIZE => {
                    output.set_header_table_size(value.min(4096) as usize)
                }
                setting::ENABLE_PUSH if value > 1 => {
                    return Err(Error::GoAway(
                        Reason::PROTOCOL_ERROR,
                        "SETTINGS_ENABLE_PUSH above 1",
                    ));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return Err(Error::GoAway(
                            Reason::FLOW_CONTROL_ERROR,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let highest = windows.map_or(value, |(highest, _)| highest.max(value));
                    windows = Some((highest, value));
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value)
                    {
                        return Err(Error::GoAway(
                            Reason::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE out of range",
                        ));
                    }
                    output.set_max_frame(value as usize);
                }
                setting::MAX_HEADER_LIST_SIZE => {
                    self.max_header_list = usize::try_from(value).unwrap_or(usize::MAX)
                }
                _ => {}
            }
        }
        if let Some((highest, last)) = windows {
            let overflow =
                |_| Error::GoAway(Reason::FLOW_CONTROL_ERROR, "stream window above 2^31-1");
            let peak = i64::from(highest) - i64::from(self.initial_window);
            let delta = i64::from(last) - i64::from(self.initial_window);
            self.initial_window = last;
            for stream in streams.values_mut() {
                if peak > delta {
                    let mut on_the_way = stream.send_window;
                    on_the_way.adjust(peak).map_err(overflow)?;
                }
                stream.send_window.adjust(delta).map_err(overflow)?;
            }
        }
        Ok(())
    }
}
